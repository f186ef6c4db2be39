// Runs: starting them, moving them from state to state, and their events (spec: Run; States and
// transitions; DESIGN 5). Every status change goes through transitionAll() (transition() for one run),
// which checks it, writes the runs, keeps the running counts, and appends the events, in the caller's
// transaction. Admission and dispatch are in admission.ts; what is read about runs in views.ts.
export * from './admission.js'
export * from './ends.js'
export * from './events.js'
export * from './executions.js'
export * from './gauges.js'
export * from './gates.js'
export * from './history.js'
export * from './journal.js'
export * from './members.js'
export * from './outcomes.js'
export * from './people.js'
export * from './plans.js'
export * from './rows.js'
export * from './setbacks.js'
export * from './start.js'
export * from './successors.js'
export * from './transitions.js'
export * from './views.js'
export * from './work.js'
