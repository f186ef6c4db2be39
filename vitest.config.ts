import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.{ts,tsx}'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Secrets and URLs of a developer's own osctl profile must not leak into tests.
    env: { OSCTL_URL: '', OSCTL_TOKEN: '', OSCTL_PROFILE: '', NO_COLOR: '1' },
  },
})
