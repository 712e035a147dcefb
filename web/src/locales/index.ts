import quasarEn from 'quasar/lang/en-US'
import quasarZh from 'quasar/lang/zh-CN'
import en from './en'
import zh from './zh'

export type Messages = typeof en
export type Locale = 'en' | 'zh'

export const LOCALES: Locale[] = ['en', 'zh']

// Our messages, per language.
export const messages: Record<Locale, Messages> = { en, zh }

// Quasar's own strings (dialog buttons, select and table labels) in the
// same language as ours.
export const quasarLangs = { en: quasarEn, zh: quasarZh } as const
