//! The OpenGL driver's renderer name, the window's one call into OpenGL.

/// The OpenGL driver's renderer name (`GL_RENDERER`: "llvmpipe (LLVM …)", "NVIDIA
/// GeForce …"), for the window to tell a software rasteriser from a GPU.
pub fn gl_renderer(gl: &eframe::glow::Context) -> String {
    use eframe::glow::HasContext as _;
    // SAFETY: eframe hands the context out current on the thread that calls this (the
    // window's creation callback); RENDERER is a valid string query.
    unsafe { gl.get_parameter_string(eframe::glow::RENDERER) }
}
