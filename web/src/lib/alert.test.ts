import { afterEach, describe, expect, it, vi } from 'vitest'
import { alertNew, notifyBlock } from './alert'

// A browser where a page's notifications are shown with new Notification,
// or, on Android, refused: "Illegal constructor", the service worker's
// showNotification being the only way there.
function browser(permission: NotificationPermission, construct: () => void) {
  class FakeNotification {
    static permission = permission
    onclick: (() => void) | null = null
    constructor() {
      construct()
    }
    close() {}
  }
  vi.stubGlobal('document', { hidden: true })
  vi.stubGlobal('window', { Notification: FakeNotification, focus() {} })
  vi.stubGlobal('Notification', FakeNotification)
}

afterEach(() => vi.unstubAllGlobals())

describe('a new question while the page is in the background', () => {
  it('is notified where the browser shows notifications', () => {
    const shown = vi.fn()
    browser('granted', shown)
    alertNew({ notify: true, sound: false }, 'New question', 'Deploy now?')
    expect(shown).toHaveBeenCalledOnce()
  })

  it('never throws where a page cannot make a notification (Chrome on Android)', () => {
    browser('granted', () => {
      throw new TypeError("Failed to construct 'Notification': Illegal constructor. Use ServiceWorkerRegistration.showNotification() instead.")
    })
    expect(() => alertNew({ notify: true, sound: false }, 'New question', 'Deploy now?')).not.toThrow()
  })
})

describe('whether the page can notify', () => {
  it('says why not: no Notification API, or notifications blocked (as on a plain http page)', () => {
    vi.stubGlobal('window', {})
    expect(notifyBlock()).toBe('unsupported')
    browser('denied', () => {})
    expect(notifyBlock()).toBe('denied')
    browser('default', () => {})
    expect(notifyBlock()).toBe('')
    browser('granted', () => {})
    expect(notifyBlock()).toBe('')
  })
})
