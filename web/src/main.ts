import { createApp } from 'vue'
import { Quasar, Notify, Dialog } from 'quasar'
import iconSet from 'quasar/icon-set/svg-mdi-v7'
import 'quasar/src/css/index.sass'
import './app.css'
import App from './App.vue'

createApp(App)
  .use(Quasar, { plugins: { Notify, Dialog }, iconSet, config: { dark: 'auto' } })
  .mount('#app')
