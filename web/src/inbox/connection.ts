import { onMounted, onUnmounted, ref } from 'vue'
import type { WebsocketMessage } from '../gen/agentassistproto/agentassist_pb'
import { InboxClient, type ConnState, type Init } from './client'
import { wsURL } from '../lib/token'

// useConnection keeps this page's /ws connection for the life of the
// component that calls it: started on mount, stopped on unmount, given
// up when the browser says it is offline, retried at once when it says
// it is online again.
export function useConnection(token: string | null, nickname: () => string, on: {
  message: (m: WebsocketMessage) => void
  login: (resumed: boolean) => void
}) {
  const state = ref<ConnState>('connecting')
  let client: InboxClient | null = null
  let usersTimer: ReturnType<typeof setTimeout> | undefined

  function send(init: Init): boolean {
    return client?.send(init) ?? false
  }

  // rename tells the server the page's new name, keeping its client id.
  function rename() {
    client?.rename()
  }

  // Big rooms only say that presence changed; fetch the list at most
  // every 5 s.
  function refreshUsersSoon() {
    usersTimer ??= setTimeout(() => {
      usersTimer = undefined
      send({ Cmd: 'GetOnlineUsers', GetOnlineUsersRequest: {} })
    }, 5000)
  }

  const online = () => client?.reconnectNow()
  const offline = () => client?.dropNow()

  onMounted(() => {
    if (!token) {
      state.value = 'refused'
      return
    }
    client = new InboxClient(wsURL('/ws'), token, nickname, {
      message: on.message,
      state: (s) => (state.value = s),
      login: (_id, resumed) => on.login(resumed),
    })
    client.start()
    window.addEventListener('online', online)
    window.addEventListener('offline', offline)
  })

  onUnmounted(() => {
    clearTimeout(usersTimer)
    client?.stop()
    window.removeEventListener('online', online)
    window.removeEventListener('offline', offline)
  })

  return { state, send, rename, refreshUsersSoon, clientId: () => client?.clientId ?? '' }
}

export type Connection = ReturnType<typeof useConnection>
