// Installing the app. Chromium fires beforeinstallprompt once the app is
// installable and not installed; its prompt() shows the browser's own
// install dialog, allowed once per event and only on a gesture of the
// person: the event is kept until the app's Install button is tapped.
// It is not prevented: a phone's browser still offers its own banner
// too, which the person may know better. Safari has no such event: on
// an iPhone or iPad the app goes on the Home Screen from Share, and only
// there does it get notifications.
import { ref } from 'vue'

export interface InstallPromptEvent extends Event {
  prompt(): Promise<unknown>
  userChoice: Promise<{ outcome: 'accepted' | 'dismissed' }>
}

let kept: InstallPromptEvent | null = null

// installable: the browser offers to install the app now.
export const installable = ref(false)

// watchInstall listens for the browser's offer from the start: it may
// come before any component is shown.
export function watchInstall(w: Window = window): void {
  w.addEventListener('beforeinstallprompt', (e) => {
    kept = e as InstallPromptEvent
    installable.value = true
  })
  w.addEventListener('appinstalled', () => {
    kept = null
    installable.value = false
  })
}

// install shows the browser's install dialog: true when the person
// installed the app. The offer is spent either way (a browser fires a
// new one when it can offer again).
export async function install(): Promise<boolean> {
  const e = kept
  kept = null
  installable.value = false
  if (!e) return false
  try {
    await e.prompt()
    return (await e.userChoice).outcome === 'accepted'
  } catch {
    return false
  }
}

// homeScreenNeeded: an iPhone's or iPad's browser, outside the app added
// to the Home Screen, where Safari gives no notifications at all.
export function homeScreenNeeded(nav: Navigator = navigator, standalone = matchMedia('(display-mode: standalone)').matches): boolean {
  if (standalone || (nav as Navigator & { standalone?: boolean }).standalone) return false
  // An iPad asks for the desktop site: it says "Macintosh", with touch.
  return /iPhone|iPad|iPod/.test(nav.userAgent) || (/Macintosh/.test(nav.userAgent) && nav.maxTouchPoints > 1)
}
