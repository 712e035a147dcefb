import { createI18n, useI18n } from 'vue-i18n'
import { useQuasar } from 'quasar'
import { messages, quasarLangs, type Locale, type Messages } from '../locales'
import { keepLang } from './pushmessage'

export type { Locale } from '../locales'

// Typed keys for t(): a key missing from en.ts does not compile in .ts
// files; locales.test.ts checks the components' templates.
declare module 'vue-i18n' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  export interface DefineLocaleMessage extends Messages {}
}

const SAVED = 'aa.locale'

// The language chosen on this device, else the browser's.
export function initialLocale(saved: string | null = localStorage.getItem(SAVED), browser: string = navigator.language): Locale {
  if (saved === 'en' || saved === 'zh') return saved
  return browser.toLowerCase().startsWith('zh') ? 'zh' : 'en'
}

const start = initialLocale()
// The service worker's notifications speak it too.
const keepForPush = (l: Locale) => void keepLang(l).catch(() => undefined)
keepForPush(start)

// The one i18n instance of the app (composition API: components call
// useI18n()).
export const i18n = createI18n<[Messages], Locale, false>({
  legacy: false,
  locale: start,
  fallbackLocale: 'en',
  messages,
})

// quasarLang is Quasar's language pack for a locale, for app.use(Quasar).
export function quasarLang(l: Locale = start) {
  return quasarLangs[l]
}

// useLocale is the language toggle: it switches our messages and Quasar's
// together, and remembers the choice. Quasar sets <html lang> to its
// pack's name (en-US, zh-CN).
export function useLocale() {
  const $q = useQuasar()
  const { locale } = useI18n()

  function set(l: Locale) {
    locale.value = l
    localStorage.setItem(SAVED, l)
    keepForPush(l)
    $q.lang.set(quasarLangs[l])
  }

  function toggle() {
    set(locale.value === 'zh' ? 'en' : 'zh')
  }

  return { locale, set, toggle }
}
