import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import { ChatGateDecision, Gate, GateDecision, GateListQuery } from '../../shared/schemas/gates.js'
import { decideChatGate, decideGate, getGate, listGates } from '../domain/gates/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Gates (spec: Endpoints Gates). gates:write can decide merges that go live. */
export function gateRoutes({ sql }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'listGates',
      method: 'get',
      path: '/',
      summary:
        'Gates waiting, newest first; or, with status=decided, the gates decided, newest decision first, paged; filters taskId, runId, kind',
      description:
        'A plain array (spec: Gates). The waiting gates are all listed unless page or limit is given; the decided ones, which grow without end, are paged: page from 1, limit 1..200 (25 unless given). A page past the last is empty.',
      query: GateListQuery,
      response: z.array(Gate),
    },
    async (c, { query }) => listGates(sql, c.var.caller.enterpriseId, query),
  )
  route(
    app,
    {
      operationId: 'getGate',
      method: 'get',
      path: '/{id}',
      summary: 'One gate',
      params: z.object({ id: Uuid }),
      notFound: 'gate_not_found',
      response: Gate,
    },
    async (c, { params }) => getGate(sql, c.var.caller.enterpriseId, params.id),
  )
  route(
    app,
    {
      operationId: 'decideGate',
      method: 'post',
      path: '/{id}/decision',
      summary:
        'Decide a waiting gate: approve, reject or request_changes, with a note, answers or a choice',
      params: z.object({ id: Uuid }),
      notFound: 'gate_not_found',
      body: GateDecision,
      status: 201,
      response: Gate,
      errors: ['gate_not_waiting'],
    },
    async (c, { params, body }) =>
      decideGate(sql, c.var.caller.enterpriseId, params.id, body, c.var.caller.actor),
  )
  route(
    app,
    {
      operationId: 'decideChatGate',
      method: 'post',
      path: '/chat/{chatId}/decision',
      summary: 'Answer the question a chat waits on (gateId names it, else the newest)',
      params: z.object({ chatId: Uuid }),
      notFound: 'gate_not_found',
      body: ChatGateDecision,
      status: 201,
      response: Gate,
      errors: ['gate_not_waiting'],
    },
    async (c, { params, body }) =>
      decideChatGate(sql, c.var.caller.enterpriseId, params.chatId, body, c.var.caller.actor),
  )
  return app
}
