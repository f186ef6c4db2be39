//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export {
  getWebhookSecretInfo,
  rotateWebhookSecret,
  unknownHolder,
  setEnterpriseAvatar,
  deleteEnterpriseAvatar,
  webhookSecretRotatedChannel,
  settingsChangedChannel,
} from './enterprises.js'

// For the API (routes and http/) and other concepts of the domain.
export {
  getEnterprise,
  getSettings,
  updateSettings,
  type WebhookSecretHolder,
  type EnterpriseSettings,
} from './enterprises.js'

// For the API (routes and http/) and tests and benches.
export { webhookSecretHolder } from './enterprises.js'

// For other concepts of the domain and tests and benches.
export { verifyWebhookSecret } from './enterprises.js'

// For the daemon and the operator commands.
export { findEnterpriseBySlug, listEnterprises, anyEnterprise } from './enterprises.js'

// For the daemon and the operator commands and tests and benches.
export { createEnterprise } from './enterprises.js'
