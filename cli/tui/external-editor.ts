import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

// Ctrl+G in the chat prompt: the draft in the person's own editor ($VISUAL, then $EDITOR, then vi),
// as git and the shells do (Ctrl+X Ctrl+E). The editor runs in the foreground on the same terminal
// while the screen waits: run synchronously, so nothing of the screen (a redraw, ink reading stdin)
// happens until the editor has exited.

export interface EditorRun {
  /** The draft as the editor left it; null when the editor failed (the draft is kept as it was). */
  text: string | null
  /** Why it failed, for the status line. */
  error?: string
}

/** The command that edits a file: $VISUAL, $EDITOR, or vi. */
export function editorCommand(env: NodeJS.ProcessEnv = process.env): string {
  return env.VISUAL?.trim() || env.EDITOR?.trim() || 'vi'
}

/**
 * Writes the draft to a temporary file, runs the editor on it through the shell (so EDITOR may hold
 * arguments: "code --wait"), and reads it back. The file ends in .md, so editors colour markdown; the
 * one line end an editor adds at the end is dropped.
 */
export function editExternally(draft: string, env: NodeJS.ProcessEnv = process.env): EditorRun {
  const dir = mkdtempSync(join(tmpdir(), 'osctl-chat-'))
  const file = join(dir, 'message.md')
  try {
    writeFileSync(file, draft, { mode: 0o600 })
    const command = editorCommand(env)
    const run = spawnSync('/bin/sh', ['-c', `${command} "$1"`, 'osctl', file], {
      stdio: 'inherit',
      env,
    })
    if (run.error) return { text: null, error: `${command}: ${run.error.message}` }
    if (run.status !== 0)
      return { text: null, error: `${command} exited with ${run.status ?? run.signal}` }
    return { text: readFileSync(file, 'utf8').replace(/\r?\n$/, '') }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
