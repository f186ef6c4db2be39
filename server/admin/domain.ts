// The domain's functions osd admin's commands call, loaded by the command that opens the database
// (commands.ts `domain()`): `osd --help`, `--version`, `osd migrate` and the backups read none of the
// domain's modules, nor zod under them: about 230 modules, 0.6 CPU-seconds and a second of wall time
// for `osd --version` (issue 40).
export { publish, unpublish } from '../domain/catalog/index.js'
export {
  createEnterprise,
  findEnterpriseBySlug,
  listEnterprises,
} from '../domain/enterprises/index.js'
export {
  createToken,
  createUser,
  findUserByEmail,
  listTokens,
  revokeToken,
  setMembership,
  setPassword,
  usePasswordCost,
} from '../domain/people/index.js'
export { planRetention, retentionPass } from '../domain/retention/index.js'
