import { describe, expect, it } from 'vitest'
import { packageOf } from './bundled'

describe('packageOf', () => {
  const root = '/src/web'
  it('names a package by its place in web/node_modules', () => {
    expect(packageOf('/src/web/node_modules/dompurify/dist/purify.es.mjs', root)).toEqual({
      name: 'dompurify',
      dir: 'node_modules/dompurify',
      sub: 'dist',
    })
    expect(packageOf('/src/web/node_modules/@vue/shared/dist/shared.esm-bundler.js?v=1', root)).toEqual({
      name: '@vue/shared',
      dir: 'node_modules/@vue/shared',
      sub: 'dist',
    })
  })
  it('tells a nested copy from the top-level one', () => {
    expect(packageOf('/src/web/node_modules/@ag-ui/client/node_modules/zod/index.js', root)).toEqual({
      name: 'zod',
      dir: 'node_modules/@ag-ui/client/node_modules/zod',
      sub: '.',
    })
  })
  it('follows a linked node_modules to the same place', () => {
    expect(packageOf('/elsewhere/web/node_modules/quasar/dist/quasar.css', root)).toEqual({
      name: 'quasar',
      dir: 'node_modules/quasar',
      sub: 'dist',
    })
    expect(packageOf('/src/web/node_modules/@quasar/extras/exports/mdi-v7/index.js', root)?.sub).toBe(
      'exports/mdi-v7',
    )
  })
  it('skips our own sources', () => {
    expect(packageOf('/src/web/src/App.vue?vue&type=style&index=0&lang.css', root)).toBeNull()
  })
  it('gives the bundler helpers to their packages', () => {
    expect(packageOf('\0vite/preload-helper.js', root)?.name).toBe('vite')
    expect(packageOf('\0rolldown/runtime.js', root)?.name).toBe('rolldown')
    expect(packageOf('\0plugin-vue:export-helper', root)?.name).toBe('@vitejs/plugin-vue')
  })
  it('refuses code from nowhere it knows', () => {
    expect(() => packageOf('\0virtual:something', root)).toThrow(/virtual:something/)
    expect(() => packageOf('/opt/lib/x.js', root)).toThrow(/\/opt\/lib\/x\.js/)
  })
})
