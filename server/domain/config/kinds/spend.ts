import type { SpendLayer } from '../../../../shared/schemas/spend.js'
import { setCap, setEnabled } from '../../models/index.js'
import { DocumentError, type World } from '../model.js'
import type { Kind } from './kind.js'
import { requireSingletonName, singletonName } from './settings.js'

// Daily spend caps (/v1/spend, spend:write): one document, `enterprise`, with every layer's cap by the
// name of its team, task or member. A cap the document leaves out is removed; raising or removing one
// puts paused runs back in line, as PATCH /v1/spend/caps does.

type Caps = {
  enterprise: number | null
  teams: Record<string, number>
  tasks: Record<string, number>
  members: Record<string, number>
}

const layers = [
  ['teams', 'team'],
  ['tasks', 'task'],
  ['members', 'member'],
] as const satisfies readonly [keyof Omit<Caps, 'enterprise'>, SpendLayer][]

export const spendKind: Kind = {
  kind: 'SpendLimits',
  resource: 'spend',
  read(snapshot, refs) {
    const names: Record<string, Map<string, string>> = {
      team: new Map([...refs.teams].map(([name, id]) => [id, name])),
      task: new Map([...refs.tasks].map(([name, task]) => [task.id, name])),
      member: new Map([...refs.members].map(([name, id]) => [id, name])),
    }
    const caps: Caps = { enterprise: null, teams: {}, tasks: {}, members: {} }
    for (const cap of snapshot.spend.caps) {
      if (cap.layer === 'enterprise') {
        if (cap.layerId === snapshot.enterprise.id) caps.enterprise = cap.moneyCentsDay
        continue
      }
      // A cap whose team, task or member is gone holds nothing back: it has no name to be written by.
      const name = names[cap.layer]!.get(cap.layerId)
      const field = layers.find(([, layer]) => layer === cap.layer)![0]
      if (name !== undefined) caps[field][name] = cap.moneyCentsDay
    }
    return [
      {
        kind: 'SpendLimits',
        name: singletonName,
        layer: null,
        id: snapshot.enterprise.id,
        spec: { enabled: snapshot.spend.enabled, moneyCentsDay: caps },
      },
    ]
  },
  desire(doc, world) {
    requireSingletonName(doc.name)
    const caps = doc.spec.moneyCentsDay as Caps
    const known: Record<string, Set<string>> = {
      teams: world.teams,
      tasks: world.tasks,
      members: world.members,
    } satisfies Record<string, World[keyof World]>
    for (const [field] of layers)
      for (const name of Object.keys(caps[field]))
        if (!known[field]!.has(name))
          throw new DocumentError(
            `spec.moneyCentsDay.${field}.${name}`,
            `no ${field.slice(0, -1)} "${name}" here or among the documents`,
          )
    return doc.spec
  },
  async update(w, live, spec, fields) {
    const enterpriseId = w.ctx.enterpriseId
    if (fields.has('moneyCentsDay')) {
      const had = live.spec.moneyCentsDay as Caps
      const want = spec.moneyCentsDay as Caps
      if (had.enterprise !== want.enterprise)
        await setCap(w.db, enterpriseId, { layer: 'enterprise', moneyCentsDay: want.enterprise })
      for (const [field, layer] of layers) {
        const ids = { team: w.refs.teams, member: w.refs.members }
        for (const name of new Set([...Object.keys(had[field]), ...Object.keys(want[field])])) {
          const cap = want[field][name] ?? null
          if (cap === (had[field][name] ?? null)) continue
          const layerId = layer === 'task' ? w.refs.tasks.get(name)?.id : ids[layer].get(name)
          // A cap of a team, task or member this apply removed went with it.
          if (layerId === undefined) continue
          await setCap(w.db, enterpriseId, { layer, layerId, moneyCentsDay: cap })
        }
      }
    }
    if (fields.has('enabled')) await setEnabled(w.db, enterpriseId, spec.enabled as boolean)
  },
}
