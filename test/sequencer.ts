import { readFileSync } from 'node:fs'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

// The order files start in: the longest first, by the times in test/durations.json (what a full run
// on two cores took for each file, in ms; `npm run test:durations` writes it again after a run), so
// that the run does not end with one long file alone on an idle machine. Vitest's own order uses its
// cache of the last run on this machine, and without one (a fresh clone: CI, a newcomer) the largest
// files first: the minute schedule-once.test.ts waits for then came last, and CI's run ended with 27-45
// s of it alone (issue 40). A file the table does not know (a new one) starts first, as in vitest's.

export const durations: Record<string, number> = JSON.parse(
  readFileSync(new URL('./durations.json', import.meta.url), 'utf8'),
)

export function durationKey(file: TestSpecification): string {
  const root = file.project.config.root.replace(/\/$/, '')
  return `${file.project.name}:${file.moduleId.slice(root.length + 1)}`
}

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const grouped = await super.sort(files)
    const projects = [...new Set(grouped.map((file) => file.project.name))]
    const time = (file: TestSpecification) => durations[durationKey(file)] ?? Number.MAX_VALUE
    // Projects keep vitest's order (they run one after the other); within one, the longest first.
    return projects.flatMap((name) =>
      grouped.filter((file) => file.project.name === name).sort((a, b) => time(b) - time(a)),
    )
  }
}
