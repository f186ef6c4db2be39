import type { Command } from 'commander'
import type { MakeDeps } from '../command.js'

/** Registers the `osctl gates` verbs. (Filled in next; wired in program.ts already.) */
export function registerGates(program: Command, makeDeps: MakeDeps): void {
  void program
  void makeDeps
}
