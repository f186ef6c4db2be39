import { accessSync, constants, mkdtempSync, rmSync, statfsSync } from 'node:fs'
import { join } from 'node:path'
import { defineConfig } from 'vitest/config'
import { LongestFirstSequencer } from './test/sequencer.js'

// The suite's temporary files on tmpfs where the machine has one (Linux's /dev/shm): its PostgreSQL's
// data, every file's database, and the data dirs, archives and backups of the osd processes it starts
// are all made in os.tmpdir(). On ext4 on this project's virtual disks, making a file's database from
// the template cost 400-500 ms of kernel time; on tmpfs 25-60 ms (issue 40). Only with 2 GiB free
// there (suiteTmpDir). Like fsync off (test/global-setup.ts), it gives up durability the tests never
// need. The directory is this run's own (OSD_SUITE_TMPDIR), removed by the global set-up's teardown
// and at the latest when vitest's process exits; OSD_TEST_TMPDIR=off keeps the machine's own
// temporary directory.
if (process.env.OSD_TEST_TMPDIR !== 'off' && !process.env.OSD_SUITE_TMPDIR) {
  const dir = suiteTmpDir()
  if (dir) {
    process.env.TMPDIR = process.env.OSD_SUITE_TMPDIR = dir
    // Also when vitest stops before its global set-up ran (a file that does not load, say).
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  }
}

function suiteTmpDir(): string | undefined {
  try {
    accessSync('/dev/shm', constants.W_OK)
    // A container's /dev/shm is often 64 MB (Docker's default): the suite holds a few hundred MB
    // there at a time, so it needs room, and uses the machine's own directory otherwise.
    const { bavail, bsize } = statfsSync('/dev/shm')
    if (bavail * bsize < 2 * 1024 ** 3) return undefined
    return mkdtempSync(join('/dev/shm', 'osd-suite-'))
  } catch {
    return undefined
  }
}

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup.ts'],
    pool: 'forks',
    // Three files at a time on two cores: most of a test waits on PostgreSQL, a daemon or a terminal,
    // and each file has a database of its own. (Vitest's default, the cores less one, ran one file
    // at a time here: npm test took 7.5 minutes; with three, 4.)
    maxWorkers: 3,
    // The longest files first, by test/durations.json, on a fresh clone too (test/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Secrets and URLs of a developer's own osctl profile must not leak into tests.
    // CI: 'false' because the screen tests draw on fake terminals, and ink under CI draws only the last
    // frame (osctl itself clears it before loading ink: cli/tui/terminal.ts drawEveryFrame).
    // OSD_IMPROVE_INTERVAL_MINUTES off: a failed run or a turned-down gate would start an os-improve run
    // (DESIGN 10) that takes the scripted model replies of the test's key; the tests of learning turn it
    // on themselves (test/server/**/recommendations.test.ts).
    // OSD_EGRESS_ALLOW: the fake tool servers listen on 127.0.0.1, which osd refuses to connect to for
    // a tenant unless allowed (DESIGN 15); the tests of that rule make apps with rules of their own
    // (test/server/http/hostile-egress.test.ts).
    // OSD_PASSWORD_COST 10: the osd processes the tests start hash at scrypt 2^10, not 2^17 (128 MiB and
    // a few hundred ms of a core each, seconds on a loaded machine); in-process apps keep 2^17 unless a
    // test lowers it (test/helpers/people.ts), and test/server/routes/auth.test.ts holds the default.
    env: {
      OSCTL_URL: '',
      OSCTL_TOKEN: '',
      OSCTL_PROFILE: '',
      NO_COLOR: '1',
      CI: 'false',
      OSD_IMPROVE_INTERVAL_MINUTES: 'off',
      OSD_EGRESS_ALLOW: '127.0.0.0/8,::1',
      OSD_PASSWORD_COST: '10',
    },
    // The files of a worker share its modules (isolate: false): each file imported the app's 400
    // modules afresh, 400 s of the suite's 13 minutes on two cores (issue 40). A file that needs
    // modules of its own (vi.mock, or state no other file may have set first) is named
    // *.isolated.test.ts and runs in a process of its own. Clean-up a helper asks for runs after its
    // file (test/helpers/after-file.ts), so nothing one file opens is left to the next.
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.{ts,tsx}'],
          exclude: ['test/**/*.isolated.test.{ts,tsx}'],
          isolate: false,
        },
      },
      { extends: true, test: { name: 'isolated', include: ['test/**/*.isolated.test.{ts,tsx}'] } },
    ],
  },
})
