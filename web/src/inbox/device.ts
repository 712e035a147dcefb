import { ref } from 'vue'

// Until the person names it, a device is called by its kind, so a room
// shows "Phone-k3x9" next to "PC-a71q"; the name is kept across reloads.
const AUTO_NAME = /^(PC|Phone|Tablet)-[a-z0-9]{4}$/
const DEVICE = 'aa.device'
const NICKNAME = 'aa.nickname'

function deviceKind() {
  const ua = navigator.userAgent
  if (/iPhone|iPod|Android.*Mobile|Mobile.*Firefox/.test(ua)) return 'Phone'
  if (/iPad|Tablet|Android/.test(ua) || (/Macintosh/.test(ua) && navigator.maxTouchPoints > 1)) return 'Tablet'
  // A touch screen as the main pointer (a browser's device mode included).
  if (matchMedia('(pointer: coarse)').matches) return Math.min(screen.width, screen.height) < 600 ? 'Phone' : 'Tablet'
  return 'PC'
}

function deviceName() {
  const kind = deviceKind()
  const saved = localStorage.getItem(DEVICE)
  if (saved?.startsWith(kind + '-')) return saved
  const name = `${kind}-${Math.random().toString(36).slice(2, 6).padEnd(4, '0')}`
  localStorage.setItem(DEVICE, name)
  return name
}

function isChosen(n: string | null): n is string {
  return !!n && !AUTO_NAME.test(n)
}

// useDevice is the name this device goes by: the one the person chose, or
// the automatic one. renamed is called when a saved name differs from the
// one in use, so the connection can log in again under it.
export function useDevice(renamed: () => void) {
  const auto = deviceName()
  const named = ref(isChosen(localStorage.getItem(NICKNAME)))
  const nickname = ref(named.value ? localStorage.getItem(NICKNAME)! : auto)

  // save keeps what is in nickname (an empty name goes back to the
  // automatic one).
  function save() {
    const n = nickname.value.trim().slice(0, 64)
    const was = named.value ? localStorage.getItem(NICKNAME) : auto
    nickname.value = n || auto
    named.value = nickname.value !== auto
    if (named.value) localStorage.setItem(NICKNAME, nickname.value)
    else localStorage.removeItem(NICKNAME)
    if (nickname.value !== was) renamed()
  }

  return { auto, named, nickname, save }
}
