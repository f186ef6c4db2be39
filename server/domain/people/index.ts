//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export {
  createConsentRequest,
  pollConsentRequest,
  consentRequestByCode,
  consentEnterprises,
  consentOwners,
  approveConsent,
  declineConsent,
  listConnections,
  revokeConnection,
} from './consent.js'
export { createInvite, listInvites, withdrawInvite, acceptInvite } from './invites.js'
export {
  getUser,
  changeRole,
  removeMembership,
  enterprisesOf,
  listPeople,
  sessionChangedChannel,
} from './people.js'
export {
  findSessionCaller,
  revokeSession,
  chooseEnterprise,
  describeSession,
  listSessions,
  revokeOwnSession,
  changePassword,
  sessionPrefix,
  type SessionLifetime,
  type FoundSession,
} from './sessions.js'
export {
  getToken,
  updateToken,
  rotateToken,
  findCallerByHash,
  noteTokenUses,
  tokenChangedChannel,
  type TokenCaller,
} from './tokens.js'

// For the API (routes and http/) and tests and benches.
export { login } from './sessions.js'

// For the API (routes and http/) and the daemon and the operator commands.
export { listTokens } from './tokens.js'

// For the API (routes and http/), the daemon and the operator commands and tests and benches.
export { createToken, revokeToken } from './tokens.js'

// For the daemon and the operator commands.
export { findUserByEmail } from './people.js'
export { setPassword } from './sessions.js'

// For the daemon and the operator commands and tests and benches.
export { createUser, setMembership } from './people.js'

// For tests and benches.
export { consentLimits } from './consent.js'
export { hashPassword, passwordCost, hashing, usePasswordCost } from './passwords.js'
export { createUserWithHash } from './people.js'
export { openSession } from './sessions.js'
