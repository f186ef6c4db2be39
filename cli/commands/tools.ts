import type { Command } from 'commander'
import type { MakeDeps } from '../command.js'

/** Registers the `osctl tools` verbs. (Filled in next; wired in program.ts already.) */
export function registerTools(program: Command, makeDeps: MakeDeps): void {
  void program
  void makeDeps
}
