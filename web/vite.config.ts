/// <reference types="vitest/config" />
import { defineConfig } from 'vite'
import vue from '@vitejs/plugin-vue'
import { quasar, transformAssetUrls } from '@quasar/vite-plugin'
import { VitePWA } from 'vite-plugin-pwa'
import { bundledPackages } from './plugins/bundled.ts'

// The build goes straight into the Go embed directory.
export default defineConfig({
  plugins: [
    vue({ template: { transformAssetUrls } }),
    // The npm packages the app's bundle holds, for THIRD_PARTY_NOTICES.md.
    bundledPackages('app'),
    quasar({ sassVariables: false }),
    // The installable app: our own service worker (src/sw.ts: the
    // precached shell and Web Push), registered by src/lib/sw.ts.
    VitePWA({
      strategies: 'injectManifest',
      srcDir: 'src',
      filename: 'sw.ts',
      injectRegister: false,
      injectManifest: {
        globPatterns: ['**/*.{js,css,html,svg,png,woff,woff2}'],
        rollupFormat: 'iife',
        maximumFileSizeToCacheInBytes: 4 << 20,
        // The service worker is a build of its own (Workbox in sw.js).
        buildPlugins: { vite: [bundledPackages('sw')] },
      },
      includeAssets: ['favicon.svg'],
      manifest: {
        id: '/',
        name: 'Agent Assistant', // as the title bar says; the install prompt shows it
        short_name: 'Agent Assistant', // the home screen's label, as the app names itself
        description: "Your agents' questions and reports, answered from any device",
        start_url: '/', // no token: the app keeps it on the device
        scope: '/',
        display: 'standalone',
        theme_color: '#1976d2', // the top bar's (Quasar's primary): the status bar above it
        background_color: '#ffffff',
        icons: [
          { src: '/icons/icon-192.png', sizes: '192x192', type: 'image/png', purpose: 'any' },
          { src: '/icons/icon-512.png', sizes: '512x512', type: 'image/png', purpose: 'any' },
          { src: '/icons/maskable-512.png', sizes: '512x512', type: 'image/png', purpose: 'maskable' },
        ],
      },
    }),
  ],
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
    include: ['src/**/*.test.ts', 'plugins/**/*.test.ts'],
    environment: 'node',
  },
})
