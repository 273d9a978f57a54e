import Foundation

/// What gatewayd changes in the C wasm2c (wabt 1.0.32) writes, before
/// compiling a module:
///
/// - wasm2c bounds recursion by counting frames (500), not bytes, so a guest
///   with large frames overflows the native stack long before that (3,000
///   live locals recursing 496 deep is 12 MiB). Each function's prologue
///   instead compares its frame's address with a limit 1 MiB above the
///   bottom of the calling thread's stack (`gw_stack_limit`, set by the
///   glue), so exhaustion is a trap, whatever the frames weigh. The 1 MiB
///   left is for the host functions a guest calls; a frame is at most
///   50,000 locals (400 KB).
/// - Compiled code has no fuel: each function entry and each loop header
///   counts down a tick budget (`GW_TICK`), and every 4,096 ticks the glue
///   reads the clock against the callback's deadline (`gw_out_of_time`):
///   past it, the guest traps. Every path that runs unbounded (a loop, a
///   recursion) passes one or the other, so no callback outlives its deadline
///   by more than 4,096 ticks.
enum RuntimePatch {
    static let prologue = """
        #if WASM_RT_USE_STACK_DEPTH_COUNT
        #define FUNC_PROLOGUE                                            \\
          if (++wasm_rt_call_stack_depth > WASM_RT_MAX_CALL_STACK_DEPTH) \\
            TRAP(EXHAUSTION);

        #define FUNC_EPILOGUE --wasm_rt_call_stack_depth
        #else
        #define FUNC_PROLOGUE

        #define FUNC_EPILOGUE
        #endif
        """

    static let guarded = """
        extern _Thread_local uintptr_t gw_stack_limit;
        extern _Thread_local int64_t gw_ticks;
        int gw_out_of_time(void);
        /* The deadline's trap: a code of gatewayd's own, past wabt's. */
        #define GW_TICK() do { if (--gw_ticks < 0 && gw_out_of_time()) wasm_rt_trap((wasm_rt_trap_t)100); } while (0)
        #define FUNC_PROLOGUE { char gw_probe; if ((uintptr_t)&gw_probe < gw_stack_limit) TRAP(EXHAUSTION); GW_TICK(); }
        #define FUNC_EPILOGUE
        """

    /// Patches `module` (wasm2c's C) in place.
    static func apply(module: String) throws(FilterCompiler.Failure) {
        guard let text = try? String(contentsOfFile: module, encoding: .utf8) else { throw FilterCompiler.Failure(description: "cannot read \(module)") }
        guard text.components(separatedBy: prologue).count == 2 else {
            throw FilterCompiler.Failure(description: "wasm2c's output is not the version gatewayd patches (wabt 1.0.32)")
        }
        // A loop's header is its label alone on a line (`  w2c_L0: `): each pass through it ticks.
        let patched = text.replacingOccurrences(of: prologue, with: guarded)
            .replacing(/(?m)^(\s*w2c_L\d+): $/) { "\($0.output.1): GW_TICK();" }
        guard FileManager.default.createFile(atPath: module, contents: Data(patched.utf8)) else {
            throw FilterCompiler.Failure(description: "cannot write \(module)")
        }
    }
}
