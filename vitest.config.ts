import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.{ts,tsx}'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Secrets and URLs of a developer's own osctl profile must not leak into tests.
    // CI: 'false' because the screen tests draw on fake terminals, and ink under CI draws only the last
    // frame (osctl itself clears it before loading ink: cli/tui/terminal.ts drawEveryFrame).
    env: { OSCTL_URL: '', OSCTL_TOKEN: '', OSCTL_PROFILE: '', NO_COLOR: '1', CI: 'false' },
  },
})
