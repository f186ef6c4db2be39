import { writeFileSync } from 'node:fs'
import type { Reporter, TestCase } from 'vitest/node'

// A vitest reporter for sizing tests on a slow machine (docs/developing.md, issue 40): every test's
// time and timeout go to test-times.jsonl, and at the end the ten slowest are printed, with those
// that took more than a third of their timeout. Used beside the default reporter:
//   taskset -c 0 npx vitest run --reporter=default --reporter=./scripts/timeouts-reporter.ts

interface Timed {
  file: string
  test: string
  state: string
  ms: number
  timeoutMs: number
}

export default class TimeoutsReporter implements Reporter {
  private readonly timed: Timed[] = []

  onTestCaseResult(testCase: TestCase): void {
    this.timed.push({
      file: testCase.module.relativeModuleId,
      test: testCase.fullName,
      state: testCase.result().state,
      ms: Math.round(testCase.diagnostic()?.duration ?? 0),
      timeoutMs: testCase.options.timeout ?? 0,
    })
  }

  onTestRunEnd(): void {
    writeFileSync('test-times.jsonl', this.timed.map((t) => JSON.stringify(t)).join('\n') + '\n')
    const line = (t: Timed) =>
      `  ${(t.ms / 1000).toFixed(1).padStart(6)} s of ${String(t.timeoutMs / 1000).padStart(3)} s  ${t.file} > ${t.test}`
    const slowest = [...this.timed].sort((a, b) => b.ms - a.ms)
    const close = slowest.filter((t) => t.timeoutMs > 0 && t.ms > t.timeoutMs / 3)
    process.stdout.write(
      `\nThe ten slowest tests (time of timeout):\n${slowest.slice(0, 10).map(line).join('\n')}\n` +
        `Over a third of their timeout: ${close.length ? '\n' + close.map(line).join('\n') : 'none'}\n` +
        `(every test: test-times.jsonl)\n`,
    )
  }
}
