/// <reference types="vitest/config" />
import { defineConfig } from 'vite'
import vue from '@vitejs/plugin-vue'
import { quasar, transformAssetUrls } from '@quasar/vite-plugin'

// The build goes straight into the Go embed directory.
export default defineConfig({
  plugins: [vue({ template: { transformAssetUrls } }), quasar({ sassVariables: false })],
  // vue-i18n's build flags: the composition API only, no devtools hooks.
  define: {
    __VUE_I18N_FULL_INSTALL__: false,
    __VUE_I18N_LEGACY_API__: false,
    __INTLIFY_PROD_DEVTOOLS__: false,
  },
  build: {
    outDir: '../srv/webui/dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 900,
    assetsInlineLimit: 0, // no data: URLs for scripts; CSP stays strict
  },
  server: {
    proxy: {
      '/ws': { target: 'ws://127.0.0.1:22080', ws: true },
      '/agent/ws': { target: 'ws://127.0.0.1:22080', ws: true },
      '/api': 'http://127.0.0.1:22080',
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
})
