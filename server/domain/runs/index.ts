// Runs: starting them, moving them from state to state, and their events (spec: Run; States and
// transitions; DESIGN 5). Every status change goes through transitionAll() (transition() for one run),
// which checks it, writes the runs, keeps the running counts, and appends the events, in the caller's
// transaction. Admission and dispatch are in admission.ts; what is read about runs in run-views.ts.
export * from './rows.js'
export * from './events.js'
export * from './transitions.js'
export * from './members.js'
export * from './start.js'
export * from './people.js'
