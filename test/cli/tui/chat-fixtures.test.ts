import { describe, expect, it } from 'vitest'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import { readFixtures, recordChats, stable, writeFixtures } from '../../helpers/chat-recorder.js'

// The chat screen's tests draw test/fixtures/chat/*.json: what the real daemon answers GET
// /v1/chats/{id} with, recorded by test/helpers/chat-recorder.ts. This records them again from the
// daemon of this tree and fails when they drift (ids and times aside); RECORD_CHAT_FIXTURES=1 (npm run
// record:chat) writes them instead.

describe('the chat fixtures', () => {
  it('are what the daemon answers now', { timeout: 120_000 }, async () => {
    const recording = await recordChats()
    for (const detail of Object.values(recording)) ChatDetail.parse(detail)
    if (process.env.RECORD_CHAT_FIXTURES === '1') writeFixtures(recording)
    expect(stable(readFixtures(), { times: false })).toEqual(stable(recording, { times: false }))
  })
})
