// Secrets sealed at rest (crypto.ts seals them; DESIGN 3): which key each stored secret names, sealing
// them all again under a new key (osd admin secrets rotate-key), and whether this process's key opens
// what the database holds (a restored backup needs its instance's key).

// For the daemon and the operator commands.
export { secretKeysChangedChannel, sealedKeyUse, resealAll } from './sealed.js'
export type { Unopenable } from './sealed.js'
export { secretKeyProblem } from './secret-check.js'
