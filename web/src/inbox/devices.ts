// What to call the other devices of the token. Every device chooses its own
// nickname, so two can show the same one (a phone renamed "⌨ desk" next to
// the PC that really types on desk, or a second "Laptop"): a name shown by
// more than one device, this one included, carries the start of its client
// id, which the server assigns and no device can choose.
import { isInputCompanion, pcName } from './remoteInput'

export interface Device {
  clientId: string
  nickname: string
}

// shownName is a device's name without the typing mark.
export function shownName(nickname: string): string {
  return isInputCompanion(nickname) ? pcName(nickname) : nickname.trim()
}

const key = (s: string) => s.trim().toLocaleLowerCase()

export function deviceLabels(others: Device[], myNickname: string): Record<string, string> {
  const count = new Map<string, number>()
  const bump = (s: string) => count.set(key(s), (count.get(key(s)) ?? 0) + 1)
  bump(shownName(myNickname))
  for (const u of others) bump(shownName(u.nickname))
  const out: Record<string, string> = {}
  for (const u of others) {
    const name = shownName(u.nickname)
    out[u.clientId] = (count.get(key(name)) ?? 0) > 1 ? `${name} · ${u.clientId.slice(0, 6)}` : name
  }
  return out
}
