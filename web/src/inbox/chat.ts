import { ref } from 'vue'
import type { Store } from './store'
import type { Connection } from './connection'

export interface Peer {
  clientId: string
  nickname: string
}

// useChat is the chat with one other device at a time: opening it marks
// the peer's lines read; a line sent is shown once the socket took it.
export function useChat(store: Store, conn: Pick<Connection, 'send'>, nickname: () => string) {
  const peer = ref<Peer | null>(null)

  function open(u: Peer) {
    peer.value = u
    store.openChat(u.clientId)
  }

  function close() {
    peer.value = null
  }

  function send(text: string) {
    const p = peer.value
    if (p && conn.send(store.chatFrame(p.clientId, text))) store.chatSent(p.clientId, nickname(), text)
  }

  return { peer, open, close, send }
}
