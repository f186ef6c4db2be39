import type { RetentionSettingsInput } from '../../../../shared/schemas/retention.js'
import { updateRetention } from '../../retention/index.js'
import type { Kind } from './kind.js'
import { requireSingletonName, singletonName } from './settings.js'

// Retention windows (GET/PATCH /v1/enterprise/retention, enterprise:write; issue 46): one document,
// `enterprise`. A field the document leaves out has its default, as a new enterprise has.

export const retentionKind: Kind = {
  kind: 'Retention',
  resource: 'enterprise',
  read: (snapshot) => [
    {
      kind: 'Retention',
      name: singletonName,
      layer: null,
      id: snapshot.enterprise.id,
      spec: { ...snapshot.retention },
    },
  ],
  desire(doc) {
    requireSingletonName(doc.name)
    return doc.spec
  },
  async update(w, _live, spec, fields) {
    const patch: Record<string, unknown> = {}
    for (const field of fields) patch[field] = spec[field]
    await updateRetention(w.db, w.ctx.enterpriseId, patch as RetentionSettingsInput)
  },
}
