// The service worker's registration: the installed app's shell and Web
// Push. Browsers allow it only in a secure context (https, or localhost).
export function swSupported(): boolean {
  return window.isSecureContext && 'serviceWorker' in navigator
}

export function registerSW(): Promise<ServiceWorkerRegistration> | undefined {
  if (!swSupported()) return undefined
  return navigator.serviceWorker.register('/sw.js', { scope: '/' })
}
