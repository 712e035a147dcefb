import { defineConfig } from 'vitest/config'

// Browser end-to-end tests: real binaries (make build first), Debian's
// Chromium. One file at a time: each starts its own server and browser.
export default defineConfig({
  test: {
    include: ['e2e/**/*.test.ts'],
    environment: 'node',
    testTimeout: 90_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
})
