/// The engine a filter's VM runs its module on.
protocol FilterEngine: AnyObject {
    var memory: GuestMemory { get }
    func exports(_ callback: FilterVM.Callback) -> Bool
    /// Runs `callback` (nil: not exported, or it returns nothing); throws what stopped it.
    func call(_ callback: FilterVM.Callback, _ arguments: CallbackArguments) throws -> UInt32?
    /// `size` bytes from the guest's allocator (0 when it failed).
    func allocate(_ size: UInt32) throws -> UInt32
}
