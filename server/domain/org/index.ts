//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export { listEmails, openEmail, getAttachment } from './mail.js'
export { getMember, setMemberAvatar, getMemberAvatar, deleteMemberAvatar } from './members.js'
export { getRole, getRoleDetail, grantRole, addTeamMember } from './roles.js'
export { getTeam } from './teams.js'
export { getOrgTree } from './tree.js'

// For the API (routes and http/) and other concepts of the domain.
export { listMembers, requireMember, updateMember, removeMember } from './members.js'
export { listRoles, createRole, revokeRole, deleteRole } from './roles.js'
export { listTeams, updateTeam, deleteTeam, removeTeamMember } from './teams.js'

// For the API (routes and http/), other concepts of the domain and tests and benches.
export { createMember } from './members.js'
export { createTeam } from './teams.js'

// For the engine and tests and benches.
export { sendMail } from './mail.js'

// For other concepts of the domain.
export { parseImageDataUrl } from './images.js'
export { memberNotFound } from './members.js'
export { roleNotFound, requireRole, lockRole, holdRole, renameRole } from './roles.js'
export { teamNotFound, requireTeam, joinTeam } from './teams.js'
