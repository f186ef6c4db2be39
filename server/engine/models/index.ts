export * from './call.js'
export * from './providers.js'
export * from './stream.js'
// The provider's interface is the domain's (domain/models/provider.ts): offered here too, for the engine.
export {
  ProviderError,
  type Credentials,
  type Message,
  type ModelProvider,
  type ModelReply,
  type ModelRequest,
  type OnText,
  type ToolCall,
  type ToolSpec,
} from '../../domain/models/index.js'
