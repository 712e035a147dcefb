// Attention for a new question while the tab is in the background: a
// desktop notification (once the user allowed it) and a short chime made
// with WebAudio, so no audio file is needed.
const PREFS = 'aa.alerts'

export interface AlertPrefs {
  notify: boolean
  sound: boolean
}

export function loadPrefs(): AlertPrefs {
  try {
    return { notify: true, sound: true, ...JSON.parse(localStorage.getItem(PREFS) ?? '{}') }
  } catch {
    return { notify: true, sound: true }
  }
}

export function savePrefs(p: AlertPrefs) {
  localStorage.setItem(PREFS, JSON.stringify(p))
}

// notifyBlock says why this page cannot show notifications: no
// Notification API ('unsupported'), or the site's notifications blocked
// ('denied': by the person, or by the browser on a plain http page at a
// network address); '' when it can, or may once asked.
export function notifyBlock(): '' | 'unsupported' | 'denied' {
  if (!('Notification' in window)) return 'unsupported'
  return Notification.permission === 'denied' ? 'denied' : ''
}

export async function askPermission(): Promise<boolean> {
  if (!('Notification' in window)) return false
  if (Notification.permission === 'granted') return true
  if (Notification.permission === 'denied') return false
  return (await Notification.requestPermission()) === 'granted'
}

let ctx: AudioContext | undefined

export function chime() {
  try {
    ctx ??= new AudioContext()
    const now = ctx.currentTime
    for (const [i, f] of [660, 880].entries()) {
      const o = ctx.createOscillator()
      const g = ctx.createGain()
      o.frequency.value = f
      g.gain.setValueAtTime(0.0001, now + i * 0.12)
      g.gain.exponentialRampToValueAtTime(0.15, now + i * 0.12 + 0.02)
      g.gain.exponentialRampToValueAtTime(0.0001, now + i * 0.12 + 0.25)
      o.connect(g).connect(ctx.destination)
      o.start(now + i * 0.12)
      o.stop(now + i * 0.12 + 0.3)
    }
  } catch {
    /* no audio: fine */
  }
}

export function alertNew(prefs: AlertPrefs, title: string, body: string) {
  if (!document.hidden) return
  if (prefs.sound) chime()
  if (prefs.notify && 'Notification' in window && Notification.permission === 'granted') {
    let n: Notification
    try {
      n = new Notification(title, { body: body.slice(0, 180), tag: 'aa-question' })
    } catch {
      // Chrome on Android makes no page notifications ("Illegal
      // constructor"); the phone has Web Push for that. Throwing here
      // would cut short the handling of the question that just came.
      return
    }
    n.onclick = () => {
      window.focus()
      n.close()
    }
  }
}
