import { ApiError } from '../../../shared/errors.js'
import { imageContentTypes } from '../../../shared/schemas/enterprise.js'

export type ImageContentType = (typeof imageContentTypes)[number]

export interface Image {
  contentType: ImageContentType
  data: Buffer
}

// The first bytes each accepted format starts with; a data URL whose bytes are not the image it claims
// to be is refused, so an answer with that content type never carries something else.
const signatures: Record<ImageContentType, (b: Buffer) => boolean> = {
  'image/png': (b) =>
    b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  'image/jpeg': (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  'image/gif': (b) => ['GIF87a', 'GIF89a'].includes(b.subarray(0, 6).toString('latin1')),
  'image/webp': (b) =>
    b.subarray(0, 4).toString('latin1') === 'RIFF' &&
    b.subarray(8, 12).toString('latin1') === 'WEBP',
}

/** Parses `data:image/png;base64,...` into its bytes; anything else is 400 invalid_image. */
export function parseImageDataUrl(dataUrl: string): Image {
  const match =
    /^data:(image\/[a-z+.-]+)(?:;[a-z-]+=[^;,]*)*;base64,([A-Za-z0-9+/\s]*={0,2})$/i.exec(
      dataUrl.trim(),
    )
  const contentType = match?.[1]
    ?.toLowerCase()
    .replace('image/jpg', 'image/jpeg') as ImageContentType
  if (!match || !imageContentTypes.includes(contentType)) {
    throw new ApiError(
      'invalid_image',
      'dataUrl must be a base64 data: URL of a png, jpeg, gif or webp image.',
    )
  }
  const data = Buffer.from(match[2]!.replace(/\s+/g, ''), 'base64')
  if (data.length === 0 || !signatures[contentType](data)) {
    throw new ApiError('invalid_image', `dataUrl does not hold a ${contentType} image.`)
  }
  return { contentType, data }
}
