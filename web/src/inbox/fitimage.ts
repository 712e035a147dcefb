// An image a person attaches to an answer, made fit for the agent's
// model: PNG, JPEG, GIF and WebP only (what models read), at most
// FIT_EDGE pixels on its long side (Anthropic's models scale larger ones
// down to it anyway; OpenAI's to less) and FIT_BYTES long (a model's API
// refuses an image of 5 MB or more of base64). A phone's photo (4,000
// pixels, 3 to 8 MB, or HEIC where the browser reads it), a screenshot
// of a large screen, a BMP: each is drawn again, smaller: a photo (JPEG,
// HEIC, AVIF, WebP) as a JPEG, any other as a PNG while that fits (a
// JPEG then, its see-through parts white).
// One already fit is kept byte for byte.

export const FIT_EDGE = 1568
export const FIT_BYTES = 3_750_000 // 5 MB of base64
export const MAX_INPUT = 40 << 20 // what is read at all (decoding costs memory)

const READ = ['image/png', 'image/jpeg', 'image/gif', 'image/webp']
const PHOTO = ['image/jpeg', 'image/heic', 'image/heif', 'image/avif', 'image/webp']

export type Fitted = { data: string; mime: string }

// fitImage is f fit for a model, or null when the browser cannot read
// it as an image.
export async function fitImage(f: Blob): Promise<Fitted | null> {
  let bmp: ImageBitmap
  try {
    bmp = await createImageBitmap(f)
  } catch {
    return null
  }
  try {
    const { width: w, height: h } = bmp
    if (READ.includes(f.type) && Math.max(w, h) <= FIT_EDGE && f.size <= FIT_BYTES) return { data: await base64(f), mime: f.type }
    const scale = Math.min(1, FIT_EDGE / Math.max(w, h))
    const c = new OffscreenCanvas(Math.max(1, Math.round(w * scale)), Math.max(1, Math.round(h * scale)))
    const g = c.getContext('2d')
    if (!g) return null
    g.drawImage(bmp, 0, 0, c.width, c.height)
    if (!PHOTO.includes(f.type) || seeThrough(g, c.width, c.height)) {
      const png = await c.convertToBlob({ type: 'image/png' })
      if (png.size <= FIT_BYTES) return { data: await base64(png), mime: 'image/png' }
    }
    // A JPEG has no see-through parts: they go white, as on a page.
    g.globalCompositeOperation = 'destination-over'
    g.fillStyle = '#fff'
    g.fillRect(0, 0, c.width, c.height)
    for (const quality of [0.85, 0.7, 0.5]) {
      const jpeg = await c.convertToBlob({ type: 'image/jpeg', quality })
      if (jpeg.size <= FIT_BYTES) return { data: await base64(jpeg), mime: 'image/jpeg' }
    }
    return null
  } finally {
    bmp.close()
  }
}

// seeThrough reports whether a pixel of the drawing is not opaque.
function seeThrough(g: OffscreenCanvasRenderingContext2D, w: number, h: number): boolean {
  const px = g.getImageData(0, 0, w, h).data
  for (let i = 3; i < px.length; i += 4) if (px[i]! < 255) return true
  return false
}

async function base64(b: Blob): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const r = new FileReader()
    r.onload = () => resolve(String(r.result).split(',')[1] ?? '')
    r.onerror = () => reject(r.error)
    r.readAsDataURL(b)
  })
}
