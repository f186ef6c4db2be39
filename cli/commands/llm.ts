import type { Command } from 'commander'
import type { MakeDeps } from '../command.js'

/** Registers the `osctl llm` verbs. (Filled in next; wired in program.ts already.) */
export function registerLlm(program: Command, makeDeps: MakeDeps): void {
  void program
  void makeDeps
}
