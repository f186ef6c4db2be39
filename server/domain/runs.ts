// Runs: starting them, moving them from state to state, and their events (spec: Run; States and
// transitions; DESIGN 5). Every status change goes through transitionAll() (transition() for one run),
// which checks it, writes the runs, keeps the running counts, and appends the events, in the caller's
// transaction. Admission and dispatch are in admission.ts; what is read about runs in run-views.ts.
export * from './runs/rows.js'
export * from './runs/events.js'
export * from './runs/transitions.js'
export * from './runs/members.js'
export * from './runs/start.js'
export * from './runs/people.js'
