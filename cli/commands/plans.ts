import type { Command } from 'commander'
import type { MakeDeps } from '../command.js'

/** Registers the `osctl plans` verbs. (Filled in next; wired in program.ts already.) */
export function registerPlans(program: Command, makeDeps: MakeDeps): void {
  void program
  void makeDeps
}
