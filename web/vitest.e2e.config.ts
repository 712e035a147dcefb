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
    // expect.poll waits on what the page shows; its default bound (1 s)
    // is a timing: a 3000×2000 photo's thumbnail took longer on a loaded
    // 2-CPU machine. Passing polls end as soon as they hold.
    expect: { poll: { timeout: 15_000 } },
  },
})
