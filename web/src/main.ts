import { createApp } from 'vue'
import { Quasar, Notify, Dialog } from 'quasar'
import iconSet from 'quasar/icon-set/svg-mdi-v7'
import 'quasar/src/css/index.sass'
import './app.css'
import App from './App.vue'
import { i18n, quasarLang } from './lib/i18n'
import { registerSW } from './lib/sw'
import { watchInstall } from './lib/install'

// Before the app mounts: the browser may offer to install it at once.
watchInstall()

createApp(App)
  .use(i18n)
  .use(Quasar, { plugins: { Notify, Dialog }, iconSet, lang: quasarLang(), config: { dark: 'auto' } })
  .mount('#app')

registerSW()?.catch((e: unknown) => console.warn('service worker not registered', e))
