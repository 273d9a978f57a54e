import Foundation

/// What gatewayd changes in wabt's wasm2c runtime (1.0.32) and in the C
/// wasm2c writes, before compiling a module:
///
/// - The runtime's trap target (`wasm_rt_jmp_buf`) and call-depth counters
///   are process globals; a module's VMs run on several event loops at once,
///   so they are made per thread (`_Thread_local`): a trap on one loop never
///   unwinds into another's call.
/// - wasm2c bounds recursion by counting frames (500), not bytes: a guest
///   with large frames overflows the native stack long before that (3,000
///   live locals recursing 496 deep is 12 MiB). Each function's prologue
///   instead compares its frame's address with a limit set per thread at
///   1 MiB above the bottom of the thread's stack (`gw_stack_limit`, set by
///   the glue), so exhaustion is a trap, whatever the frames weigh. The
///   1 MiB left is for the host functions a guest calls, and a frame is at
///   most 50,000 locals (400 KB).
enum RuntimePatch {
    struct Replacement {
        let file: String
        let old: String
        let new: String
    }

    static let replacements = [
        Replacement(file: "wasm-rt.h", old: "extern uint32_t wasm_rt_call_stack_depth;",
                    new: "extern _Thread_local uint32_t wasm_rt_call_stack_depth;"),
        Replacement(file: "wasm-rt-impl.h", old: "extern jmp_buf wasm_rt_jmp_buf;", new: "extern _Thread_local jmp_buf wasm_rt_jmp_buf;"),
        Replacement(file: "wasm-rt-impl.h", old: "extern uint32_t wasm_rt_saved_call_stack_depth;",
                    new: "extern _Thread_local uint32_t wasm_rt_saved_call_stack_depth;"),
        Replacement(file: "wasm-rt-impl.c", old: "\njmp_buf wasm_rt_jmp_buf;", new: "\n_Thread_local jmp_buf wasm_rt_jmp_buf;"),
        Replacement(file: "wasm-rt-impl.c", old: "uint32_t wasm_rt_call_stack_depth;\nuint32_t wasm_rt_saved_call_stack_depth;",
                    new: "_Thread_local uint32_t wasm_rt_call_stack_depth;\n_Thread_local uint32_t wasm_rt_saved_call_stack_depth;"),
        Replacement(file: "module.c", old: """
            #if WASM_RT_USE_STACK_DEPTH_COUNT
            #define FUNC_PROLOGUE                                            \\
              if (++wasm_rt_call_stack_depth > WASM_RT_MAX_CALL_STACK_DEPTH) \\
                TRAP(EXHAUSTION);

            #define FUNC_EPILOGUE --wasm_rt_call_stack_depth
            #else
            #define FUNC_PROLOGUE

            #define FUNC_EPILOGUE
            #endif
            """, new: """
            extern _Thread_local uintptr_t gw_stack_limit;
            #define FUNC_PROLOGUE { char gw_probe; if ((uintptr_t)&gw_probe < gw_stack_limit) TRAP(EXHAUSTION); }
            #define FUNC_EPILOGUE
            """),
    ]

    /// Copies the runtime's three files into `directory` and patches them and `module` in place.
    static func apply(runtime: String, module: String, into directory: String) throws(FilterCompiler.Failure) {
        let header = [runtime, "/usr/include", "/usr/src/wasm2c", "/usr/local/include"].map { "\($0)/wasm-rt.h" }
            .first { FileManager.default.fileExists(atPath: $0) }
        guard let header else { throw FilterCompiler.Failure(description: "wabt's wasm-rt.h is not installed: install Debian's wabt package") }
        var texts: [String: String] = [:]
        for (name, source) in [("wasm-rt.h", header), ("wasm-rt-impl.h", "\(runtime)/wasm-rt-impl.h"), ("wasm-rt-impl.c", "\(runtime)/wasm-rt-impl.c"),
                               ("module.c", module)] {
            guard let text = try? String(contentsOfFile: source, encoding: .utf8) else {
                throw FilterCompiler.Failure(description: "cannot read \(source)")
            }
            texts[name] = text
        }
        for replacement in replacements {
            guard let text = texts[replacement.file], text.components(separatedBy: replacement.old).count == 2 else {
                throw FilterCompiler.Failure(description: "wabt's wasm2c output or runtime is not the version gatewayd patches (1.0.32): \(replacement.file)")
            }
            texts[replacement.file] = text.replacingOccurrences(of: replacement.old, with: replacement.new)
        }
        for (name, text) in texts {
            guard FileManager.default.createFile(atPath: "\(directory)/\(name)", contents: Data(text.utf8)) else {
                throw FilterCompiler.Failure(description: "cannot write into \(directory)")
            }
        }
    }
}
