//! Build script: compiles `src/grpc/messaging.proto` (the gRPC API the broker serves) into
//! Rust with protox, a protobuf compiler written in Rust, and tonic-prost-build, so that a
//! machine without `protoc` builds ferromq. The generated module lands in `OUT_DIR` and is
//! included by `src/grpc/proto.rs`: the server, and a client the tests call it with.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "src/grpc/messaging.proto";
    println!("cargo:rerun-if-changed={proto}");
    println!("cargo:rerun-if-changed=build.rs");
    let descriptors = protox::compile([proto], ["src/grpc"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
