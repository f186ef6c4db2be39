import { ApiError } from '../../../../shared/errors.js'
import { fixedTools } from '../../../../shared/schemas/tasks.js'
import { ToolConnectionCreate, type ToolConnectionPatch } from '../../../../shared/schemas/tools.js'
import {
  createToolConnection,
  deleteToolConnection,
  reservedToolNamespace,
  sameToolToken,
  updateToolConnection,
  type BindRight,
} from '../../tools/index.js'
import { sameJson } from '../canonical.js'
import {
  checkLayer,
  derivedEnvName,
  DocumentError,
  layerId,
  layerName,
  parseLayer,
  secretValue,
  type Live,
  type Writer,
} from '../model.js'
import { setSecretSource } from '../secrets.js'
import type { Kind } from './kind.js'

// Tool connections (/v1/tools/bindings, tools:write), named by their tool namespace at their layer. The
// chief executive's rules are the domain's: a token that changes one on the enterprise, or a mustGate
// list, is refused 403 ceo_bind_only, and nothing of the apply stays. The egress rule checks each
// address as the API does. The token comes from `tokenFrom: env:NAME`.

/** What a connection's mustGate list is when none is given (spec: Other records). */
function defaultMustGate(name: string): string[] {
  return name === 'vcs' ? [fixedTools.merge] : []
}

const rightOf = (w: Writer): BindRight => ({ mayBindEnterprise: w.ctx.caller.mayBindEnterprise })

export const toolsKind: Kind = {
  kind: 'ToolConnection',
  resource: 'tools',
  read(snapshot, refs, db, ctx) {
    const seen = new Set<string>()
    const live: Live[] = []
    for (const conn of snapshot.tools) {
      // A connection in osd's own namespace offers no tools (made before the name was reserved), and one
      // whose layer's owner is gone reaches no run: neither has a document.
      if (reservedToolNamespace(conn.name)) continue
      const layer = layerName(refs, conn.layer, conn.layerId)
      if (layer === undefined) continue
      const key = `${layer ?? ''}:${conn.name}`
      if (seen.has(key))
        throw new ApiError(
          'config_name_ambiguous',
          `Two tool connections are named ${conn.name} on ${layer ?? 'the enterprise'}: a document names one by its name and layer. Rename or remove one (PATCH /v1/tools/bindings/{id}).`,
          { kind: 'ToolConnection', name: conn.name, layer },
        )
      seen.add(key)
      const id = conn.id
      const source = snapshot.sources.tools.get(id)
      live.push({
        kind: 'ToolConnection',
        name: conn.name,
        layer,
        id,
        spec: {
          url: conn.url ?? undefined,
          sites: conn.sites ?? undefined,
          startPage: conn.startPage ?? undefined,
          tokenFrom: conn.hasToken
            ? (source ?? derivedEnvName('OSD_TOOL', layer, conn.name, 'TOKEN'))
            : undefined,
          mustGate: conn.mustGate,
          description: conn.description,
        },
        secret: conn.hasToken
          ? (candidate) => sameToolToken(db, ctx.sealer, ctx.enterpriseId, id, candidate)
          : undefined,
        derivedSecret: conn.hasToken && source === undefined,
      })
    }
    return live
  },
  show(spec, name) {
    if (!sameJson(spec.mustGate, defaultMustGate(name))) return spec
    const { mustGate: _default, ...shown } = spec
    return shown
  },
  desire(doc, world) {
    const name = ToolConnectionCreate.shape.name.safeParse(doc.name)
    if (!name.success) throw new DocumentError('metadata.name', name.error.issues[0]!.message)
    checkLayer(world, doc.layer, ['enterprise', 'team', 'member', 'role', 'task'])
    const spec = { ...doc.spec }
    if (Boolean(spec.url) === Boolean((spec.sites as string[] | undefined)?.length))
      throw new DocumentError(
        'spec.url',
        "a connection is a tool server's url, or a browser system's sites: one of them",
      )
    spec.mustGate = [
      ...new Set((spec.mustGate as string[] | undefined) ?? defaultMustGate(doc.name)),
    ]
    return spec
  },
  async create(w, doc, spec) {
    const { kind } = parseLayer(doc.layer)
    const tokenFrom = spec.tokenFrom as string | undefined
    const conn = await createToolConnection(
      w.db,
      w.ctx.sealer,
      w.ctx.egress,
      w.ctx.enterpriseId,
      {
        name: doc.name,
        url: spec.url as string | undefined,
        token: tokenFrom ? secretValue(w, tokenFrom) : undefined,
        sites: spec.sites as string[] | undefined,
        startPage: spec.startPage as string | undefined,
        layer: kind,
        layerId: kind === 'enterprise' ? undefined : layerId(w.refs, doc.layer),
        // Given only when it is not the default: a mustGate list of its own is the chief executive's.
        mustGate: sameJson(spec.mustGate, defaultMustGate(doc.name))
          ? undefined
          : (spec.mustGate as string[]),
        description: spec.description as string,
      },
      rightOf(w),
    )
    if (tokenFrom)
      await setSecretSource(w.db, w.ctx.enterpriseId, { toolConnectionId: conn.id }, tokenFrom)
  },
  async update(w, live, spec, fields) {
    const patch: ToolConnectionPatch = {}
    if (fields.has('url')) patch.url = (spec.url as string | undefined) ?? null
    if (fields.has('sites')) patch.sites = (spec.sites as string[] | undefined) ?? null
    if (fields.has('startPage')) patch.startPage = (spec.startPage as string | undefined) ?? null
    if (fields.has('mustGate')) patch.mustGate = spec.mustGate as string[]
    if (fields.has('description')) patch.description = spec.description as string
    const tokenFrom = spec.tokenFrom as string | undefined
    // A url of another origin drops the stored token (DESIGN 15): the same change sends it again.
    if (fields.has('tokenFrom') || (fields.has('url') && tokenFrom))
      patch.token = tokenFrom ? secretValue(w, tokenFrom) : null
    await updateToolConnection(
      w.db,
      w.ctx.sealer,
      w.ctx.egress,
      w.ctx.enterpriseId,
      live.id,
      patch,
      rightOf(w),
    )
    if (fields.has('tokenFrom'))
      await setSecretSource(
        w.db,
        w.ctx.enterpriseId,
        { toolConnectionId: live.id },
        tokenFrom ?? null,
      )
  },
  async remove(w, live) {
    await deleteToolConnection(w.db, w.ctx.enterpriseId, live.id, rightOf(w))
  },
}
