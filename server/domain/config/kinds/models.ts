import {
  modelTiers,
  providers,
  type ModelTier,
  type Provider,
} from '../../../../shared/schemas/models.js'
import { bindKey, clearTierOverride, overrideTier, sameKey, unbindKey } from '../../models/index.js'
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
import { requireSingletonName, singletonName } from './settings.js'

// Model keys (/v1/llm/bindings) and the enterprise's model per tier (/v1/llm/tiers), llm:write. A key
// is named by its provider at its layer, and comes from `tokenFrom: env:NAME`; a subscription sign-in
// has no document (it is made in a browser) and is never pruned.

type KeyLayer = 'enterprise' | 'team' | 'member'

function keyLayer(w: Writer, layer: string | null): { layer: KeyLayer; layerId?: string } {
  const { kind } = parseLayer(layer)
  return kind === 'enterprise'
    ? { layer: 'enterprise' }
    : { layer: kind as KeyLayer, layerId: layerId(w.refs, layer) }
}

async function bind(w: Writer, provider: string, layer: string | null, tokenFrom: string) {
  const binding = await bindKey(w.db, w.ctx.sealer, w.ctx.enterpriseId, {
    apiKey: secretValue(w, tokenFrom),
    provider: provider as Provider,
    ...keyLayer(w, layer),
  })
  await setSecretSource(w.db, w.ctx.enterpriseId, { llmConnectionId: binding.id }, tokenFrom)
}

export const modelKeysKind: Kind = {
  kind: 'ModelKey',
  resource: 'llm',
  read(snapshot, refs, db, ctx) {
    return snapshot.keys.flatMap((key): Live[] => {
      const layer = layerName(refs, key.layer, key.layerId)
      if (layer === undefined) return []
      const id = key.id
      const source = snapshot.sources.keys.get(id)
      return [
        {
          kind: 'ModelKey',
          name: key.provider,
          layer,
          id,
          spec: { tokenFrom: source ?? derivedEnvName('OSD_MODEL_KEY', layer, key.provider) },
          secret: (candidate) => sameKey(db, ctx.sealer, ctx.enterpriseId, id, candidate),
          derivedSecret: source === undefined,
        },
      ]
    })
  },
  desire(doc, world) {
    if (!(providers as readonly string[]).includes(doc.name))
      throw new DocumentError('metadata.name', `a provider: ${providers.join(' or ')}`)
    checkLayer(world, doc.layer, ['enterprise', 'team', 'member'])
    return doc.spec
  },
  async create(w, doc, spec) {
    await bind(w, doc.name, doc.layer, spec.tokenFrom as string)
  },
  async update(w, live, spec) {
    await bind(w, live.name, live.layer, spec.tokenFrom as string)
  },
  async remove(w, live) {
    await unbindKey(w.db, w.ctx.enterpriseId, {
      provider: live.name as Provider,
      ...keyLayer(w, live.layer),
    })
  },
}

export const modelTiersKind: Kind = {
  kind: 'ModelTiers',
  resource: 'llm',
  read(snapshot) {
    const spec: Record<string, Record<string, string>> = {}
    for (const provider of providers) {
      spec[provider] = {}
      for (const tier of modelTiers) {
        const chosen = snapshot.tiers[provider][tier]
        if (chosen.overridden) spec[provider][tier] = chosen.model
      }
    }
    return [
      { kind: 'ModelTiers', name: singletonName, layer: null, id: snapshot.enterprise.id, spec },
    ]
  },
  desire(doc) {
    requireSingletonName(doc.name)
    return doc.spec
  },
  async update(w, live, spec) {
    for (const provider of providers) {
      const had = live.spec[provider] as Partial<Record<ModelTier, string>>
      const want = spec[provider] as Partial<Record<ModelTier, string>>
      for (const tier of modelTiers) {
        if (want[tier] === had[tier]) continue
        if (want[tier] !== undefined)
          await overrideTier(w.db, w.ctx.enterpriseId, { provider, tier, model: want[tier] })
        else await clearTierOverride(w.db, w.ctx.enterpriseId, { provider, tier })
      }
    }
  },
}
