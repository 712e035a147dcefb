import { describe, expect, it } from 'vitest'
import { tokenProtocols } from './token'

describe('tokenProtocols', () => {
  it('offers the plain subprotocol and the token base64url-encoded, as the server decodes it', () => {
    for (const token of ['room-A-token-0001', 'a token with spaces, commas; and é', '>>>???///+++']) {
      const [plain, carrier] = tokenProtocols(token)
      expect(plain).toBe('agentassistant')
      expect(carrier.startsWith('agentassistant.bearer.')).toBe(true)
      const enc = carrier.slice('agentassistant.bearer.'.length)
      // Only characters a subprotocol (an RFC 7230 token) may hold.
      expect(enc).toMatch(/^[A-Za-z0-9_-]+$/)
      const bin = atob(enc.replace(/-/g, '+').replace(/_/g, '/'))
      expect(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)))).toBe(token)
    }
  })
})
