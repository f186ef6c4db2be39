import { updateSettings, type EnterpriseSettings } from '../../enterprises/index.js'
import { DocumentError } from '../model.js'
import type { Kind } from './kind.js'

// The enterprise's settings: one document, `enterprise` (GET/PATCH /v1/enterprise/..., enterprise:write).

export const singletonName = 'enterprise'

/** A kind of one document per enterprise is named `enterprise`: 400 otherwise. */
export function requireSingletonName(name: string): void {
  if (name !== singletonName)
    throw new DocumentError(
      'metadata.name',
      `one document of this kind describes the enterprise: name it "${singletonName}"`,
    )
}

export const settingsKind: Kind = {
  kind: 'Settings',
  resource: 'enterprise',
  read: (snapshot) => [
    {
      kind: 'Settings',
      name: singletonName,
      layer: null,
      id: snapshot.enterprise.id,
      spec: { ...snapshot.settings },
    },
  ],
  desire(doc) {
    requireSingletonName(doc.name)
    return doc.spec
  },
  async update(w, _live, spec, fields) {
    const patch: Partial<EnterpriseSettings> = {}
    for (const field of fields) (patch as Record<string, unknown>)[field] = spec[field]
    await updateSettings(w.db, w.ctx.enterpriseId, patch)
  },
}
