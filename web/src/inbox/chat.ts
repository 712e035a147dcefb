import { ref, watch } from 'vue'
import { useQuasar } from 'quasar'
import { useI18n } from 'vue-i18n'
import type { WebsocketMessage } from '../gen/agentassistproto/agentassist_pb'
import type { Store } from './store'
import type { Connection } from './connection'
import { control, type Verb } from './remoteInput'

export interface Peer {
  clientId: string
  nickname: string
}

// useChat is the chat with one other device at a time: opening it marks
// the peer's lines read, and so does a line that arrives while it is open;
// a line sent is shown once the socket took it, and put back in the box
// when it could not be sent.
export function useChat(store: Store, conn: Pick<Connection, 'send' | 'clientId'>, nickname: () => string) {
  const $q = useQuasar()
  const { t } = useI18n()
  const { state } = store
  const peer = ref<Peer | null>(null)
  const dialog = ref<{ restore: (text: string) => void } | null>(null) // the ChatDialog

  function open(u: Peer) {
    peer.value = u
    store.openChat(u.clientId)
  }

  function close() {
    peer.value = null
  }

  function send(text: string, content = text, isControl = false) {
    const p = peer.value
    if (!p) return
    if (conn.send(store.chatFrame(p.clientId, content))) store.chatSent(p.clientId, nickname(), text, isControl)
    else {
      if (!isControl) dialog.value?.restore(text)
      $q.notify({ type: 'warning', message: `${t('people.notDelivered')}: ${t('conn.offline')}` })
    }
  }

  // A command to a remote-input PC; the chat shows what was asked.
  function sendControl(verb: Verb) {
    const label = { undo: '⌫ ' + t('input.undo'), clear: t('input.clear'), enter: '⏎ ' + t('input.enter') }[verb]
    send(label, control(verb), true)
  }

  // undelivered says a line the server could not deliver; true when the
  // frame was that.
  function undelivered(m: WebsocketMessage): boolean {
    if (m.Cmd !== 'Error' || m.Error?.cmd !== 'SendChatMessage') return false
    $q.notify({ type: 'warning', message: `${t('people.notDelivered')}: ${m.Error.message}` })
    return true
  }

  // seen marks a line from the open chat's peer read as it arrives (after
  // the store counted it).
  function seen(m: WebsocketMessage) {
    const from = m.ChatMessageNotification?.chatMessage?.senderClientId
    if (from && from === peer.value?.clientId) state.unreadChat[from] = 0
  }

  // A PC that reconnects comes back under a new client id: the open chat
  // follows it by name, with its lines.
  watch(() => state.users, (users) => {
    const p = peer.value
    if (!p || users.some((u) => u.clientId === p.clientId)) return
    const back = users.find((u) => u.nickname === p.nickname && u.clientId !== conn.clientId())
    if (!back) return
    for (const l of state.chats) if (l.peer === p.clientId) l.peer = back.clientId
    peer.value = { clientId: back.clientId, nickname: back.nickname }
  }, { deep: true }) // the list is also changed in place (a device joining)

  return { peer, dialog, open, close, send, sendControl, undelivered, seen }
}
