import { appendFile } from 'node:fs/promises'
import type { Run } from '../shared/schemas/runs.js'
import { cost } from './money.js'
import { duration } from './spinner.js'

// osctl in a GitHub Actions step (issue 51): `runs start --wait` and `runs wait` mark a failed run with
// an `::error::` workflow command, which the runner shows as an annotation on the job, and add a summary
// of the run to the step's page ($GITHUB_STEP_SUMMARY). A run's reason and output are a model's text,
// and the runner acts on any line that starts a workflow command (`::add-mask::`, `::stop-commands::`):
// everything of the run's written here is escaped, and nothing of it can start a line.

/** Whether osctl runs in a GitHub Actions step: the runner sets GITHUB_ACTIONS=true. */
export function inGithubActions(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.GITHUB_ACTIONS === 'true'
}

/** A workflow command's data, escaped as the runner unescapes it (@actions/core's escapeData). */
export function escapeData(text: string): string {
  return text.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')
}

/** A workflow command's property value: its data's escapes, and `:` and `,` that end one. */
export function escapeProperty(text: string): string {
  return escapeData(text).replace(/:/g, '%3A').replace(/,/g, '%2C')
}

/** The `::error::` line of a run that ended otherwise than succeeded, or was still pending. */
export function errorCommand(run: Run, pendingAfter?: number): string {
  const title = `osctl: run of ${run.taskSlug} ${pendingAfter === undefined ? run.status : 'still pending'}`
  const reason = run.reason ?? run.blockedReason
  const message =
    pendingAfter === undefined
      ? `run ${run.id} of ${run.taskSlug} ${run.status}${reason ? `: ${reason}` : ''}`
      : `run ${run.id} of ${run.taskSlug} is still ${run.status} after ${pendingAfter}s`
  return `::error title=${escapeProperty(title)}::${escapeData(message)}\n`
}

/**
 * Text in a cell of a markdown table: nothing in it may end the cell or the row, open a link, an
 * image, an HTML element or code, or start a heading; a run's reason is shown as plain text.
 */
export function markdownCell(text: string): string {
  return text
    .replace(/\r\n?|\n/g, ' ')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/([\\`*_{}[\]()#+\-.!|~])/g, '\\$1')
}

/** The markdown the step's summary gets for the run a wait ended with. */
export function runSummary(run: Run, now = Date.now()): string {
  const started = Date.parse(run.startedAt ?? run.createdAt)
  const ended = run.finishedAt ? Date.parse(run.finishedAt) : now
  const reason = run.reason ?? run.blockedReason
  const rows: [string, string][] = [
    ['run', run.id],
    ['task', run.taskSlug],
    ['status', run.status],
    ['cost', cost(run.costUsdCents, run.costUnpriced)],
    ['duration', `${duration(ended - started)}${run.finishedAt ? '' : ' so far'}`],
  ]
  if (reason) rows.push(['reason', reason])
  return [
    `### osctl: run of ${markdownCell(run.taskSlug)} ${markdownCell(run.status)}`,
    '',
    '| | |',
    '| --- | --- |',
    ...rows.map(([name, value]) => `| ${name} | ${markdownCell(value)} |`),
    '',
    '',
  ].join('\n')
}

/**
 * Under GitHub Actions, what a wait adds at its end: the `::error::` line (on stderr, which the runner
 * reads as it reads stdout: stdout stays the run's JSON) unless the run succeeded, and the summary
 * appended to $GITHUB_STEP_SUMMARY when the runner names one. Never fails the command: the run's end
 * is told by the exit code whatever happens to the summary.
 */
export async function reportToGithub(
  run: Run,
  outcome: { ended: boolean; timeout?: number },
  writeError: (text: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  if (!inGithubActions(env)) return
  if (!outcome.ended) writeError(errorCommand(run, outcome.timeout ?? 0))
  else if (run.status !== 'succeeded') writeError(errorCommand(run))
  const file = env.GITHUB_STEP_SUMMARY
  if (file) await appendFile(file, runSummary(run)).catch(() => undefined)
}
